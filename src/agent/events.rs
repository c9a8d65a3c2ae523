//! `AgentEvent`: the one thing a UI consumes. `vibedesk run --json` prints
//! these one per line with a snake_case `type` field; the workstation renders
//! the same stream. Names and fields are a public interface: add, never rename.

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use crate::model::Usage;
pub use crate::tools::events::{BatchCall, BatchMode, ToolCallStatus, ToolEvent};

/// How a run or a team ended (docs §1.4, §14.4). `partial`: an answer was
/// delivered but some of its tool calls (a team: some of its tasks) failed;
/// `failed` includes a run whose every tool call failed, answer or not;
/// `unsupported`: no tool offered could serve the request, and the answer
/// says what is missing (a run only: a team's member that ends so failed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Success,
    Partial,
    Failed,
    Cancelled,
    Interrupted,
    Unsupported,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Partial => "partial",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Unsupported => "unsupported",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    RunStarted {
        run_id: String,
        session_id: String,
        run_dir: String,
        provider: String,
        model: String,
        max_iterations: u32,
    },
    /// `iter` is session-monotonic (docs §1.2 step 8); `step` counts 1..=max in this run.
    IterationStarted {
        iter: u64,
        step: u32,
        max_iterations: u32,
    },
    /// The token estimate at the top of an iteration, before compaction.
    Watermark {
        iter: u64,
        tokens: u64,
        threshold: u64,
        /// Gates of the compaction layers, in tokens (L1, L2, L3).
        gates: [u64; 3],
        estimator: String,
        messages: usize,
    },
    /// A compaction layer begins. `layer` is `microcompact` (L1), `collapse`
    /// (L2) or `auto_compact` (L3, which also serves L4 and L5); `trigger` is
    /// `threshold` (a gate was crossed), `tool` (the model called `compact`)
    /// or `user` (`/compact`).
    CompactionStarted {
        iter: u64,
        layer: String,
        trigger: String,
        tokens_before: u64,
    },
    CompactionFinished {
        iter: u64,
        layer: String,
        trigger: String,
        tokens_before: u64,
        tokens_after: u64,
        messages_touched: usize,
        /// Where the originals of the touched messages were archived.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archive_path: Option<String>,
        /// The layer freed less than 5 % of the tokens; it will not be retried.
        #[serde(default)]
        ineffective: bool,
        /// L3 only: the summary call failed or timed out and a note was used.
        #[serde(default)]
        degraded: bool,
    },
    /// Finished background tasks were reported to the model.
    BackgroundResults {
        iter: u64,
        count: usize,
    },
    WrapUp {
        iter: u64,
        remaining: u32,
        max_iterations: u32,
    },
    ForcedTextOnly {
        iter: u64,
    },
    TextDelta {
        iter: u64,
        delta: String,
    },
    /// Throttled: cumulative reasoning characters and the last 600 of them.
    ReasoningDelta {
        iter: u64,
        chars: usize,
        tail: String,
    },
    ThinkingDone {
        iter: u64,
        content: String,
    },
    StreamReset {
        iter: u64,
        reason: String,
        provider: String,
        model: String,
        error: String,
        retry_in_ms: u64,
    },
    LlmUsage {
        iter: u64,
        input_tokens: u64,
        output_tokens: u64,
        total_tokens: u64,
    },
    ContentFiltered {
        iter: u64,
        consecutive: u32,
        total: u32,
        limit: u32,
    },
    EmptyResponse {
        iter: u64,
        consecutive: u32,
    },
    AnswerRejected {
        iter: u64,
        issues: Vec<String>,
        revision: u32,
    },
    StallWarning {
        idle_s: f64,
        timeout_s: f64,
    },
    Stalled {
        reason: String,
    },
    /// Something the user should know that is not an error of the run.
    Notice {
        level: NoticeLevel,
        message: String,
    },
    Answer {
        iter: u64,
        content: String,
        degraded: bool,
    },
    /// Figures of the answer just delivered that appear in no tool result
    /// of the run, as the answer wrote them (docs §1.6).
    UnverifiedNumbers {
        iter: u64,
        numbers: Vec<String>,
        /// Figures the answer has in all.
        figures: usize,
    },
    RunFinished {
        run_id: String,
        status: RunStatus,
        reason: Option<String>,
        iterations: u32,
        degraded: bool,
        run_dir: String,
        usage: Usage,
        /// The answer's figures found in no tool result (docs §1.6).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unverified_numbers: Vec<String>,
    },
    /// An MCP server's state changed (docs §13.2): `ready` with its tool
    /// count, `failed` (did not start in time, or refused the handshake) or
    /// `exited` (died after it was ready), with the reason.
    McpServerStatus {
        server: String,
        state: McpServerState,
        #[serde(default)]
        tools: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// For `ready`: tools skipped for an invalid schema, and tools left
        /// out by the cap on MCP tools per request with how to choose
        /// (docs §13.3).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
    },
    /// A research team's run begins (docs §14.4): its tasks, and their
    /// topological layers (a task's dependencies are all in earlier layers).
    SwarmStarted {
        run_id: String,
        preset: String,
        title: String,
        run_dir: String,
        layers: Vec<Vec<String>>,
        tasks: Vec<SwarmTaskInfo>,
    },
    /// One attempt of a task starts: a fresh agent loop with its own run dir.
    SwarmTaskStarted {
        task: String,
        agent: String,
        attempt: u32,
        run_dir: String,
    },
    /// An attempt failed and the task will run again with a fresh loop.
    SwarmTaskRetry {
        task: String,
        attempt: u32,
        reason: String,
    },
    SwarmTaskFinished {
        task: String,
        status: TaskState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        seconds: f64,
        tokens: u64,
    },
    SwarmFinished {
        run_id: String,
        status: RunStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        seconds: f64,
        /// Path of `report.md`.
        report: String,
    },
    /// One of a team member's own events, wrapped with its task id.
    SwarmWorker {
        task: String,
        event: Box<AgentEvent>,
    },
    /// Tool-batch events, produced by the scheduler (`tool_batch_started`,
    /// `tool_call_started`, `tool_heartbeat`, `tool_progress`,
    /// `tool_timeout_warning`, `tool_call_finished`, `tool_batch_finished`).
    #[serde(untagged)]
    Tool(ToolEvent),
}

/// One task of a team, as announced in `swarm_started`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwarmTaskInfo {
    pub id: String,
    pub agent: String,
    pub role: String,
    pub depends_on: Vec<String>,
}

/// Where a team's task is, and how it ended (docs §14.3): the one type the
/// scheduler's events, `run.json` and the Teams view share. A task whose
/// upstream failed is `failed` with a reason that names that upstream task;
/// one whose worker's run ended `partial` is `partial` (it has an answer to
/// pass on). `swarm_task_finished` carries only the finished states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Its dependencies have not all finished yet.
    Pending,
    Running,
    /// An attempt failed; the next one starts with a fresh loop (the view
    /// shows this; `run.json` keeps `running`).
    Retrying,
    Success,
    /// The worker answered, but some of its tool calls failed: its answer
    /// still goes to the tasks that depend on it.
    Partial,
    Failed,
    TimedOut,
    Cancelled,
    Interrupted,
}

impl TaskState {
    /// The wire and `run.json` name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Retrying => "retrying",
            TaskState::Success => "success",
            TaskState::Partial => "partial",
            TaskState::Failed => "failed",
            TaskState::TimedOut => "timed_out",
            TaskState::Cancelled => "cancelled",
            TaskState::Interrupted => "interrupted",
        }
    }

    /// The Teams view's word for it.
    pub fn label(self) -> &'static str {
        match self {
            TaskState::Pending => "waiting",
            TaskState::TimedOut => "timed out",
            other => other.as_str(),
        }
    }

    /// An attempt runs or is about to (its clocks move).
    pub fn is_live(self) -> bool {
        matches!(self, TaskState::Running | TaskState::Retrying)
    }

    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            TaskState::Pending | TaskState::Running | TaskState::Retrying
        )
    }

    /// The task ended with an answer its dependents may read: `success`
    /// or `partial` (docs §14.3).
    pub fn delivered(self) -> bool {
        matches!(self, TaskState::Success | TaskState::Partial)
    }
}

/// An MCP server's lifecycle state (docs §13.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpServerState {
    Starting,
    Ready,
    Failed,
    Exited,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeLevel {
    Info,
    Warning,
}

impl AgentEvent {
    /// The event as one record of the `--json` stream and of a team run's
    /// `events.jsonl` (docs §1.9): its JSON with `ts`, seconds since the
    /// epoch.
    pub fn stamped(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "ts".into(),
                serde_json::json!(chrono::Utc::now().timestamp_millis() as f64 / 1000.0),
            );
        }
        v
    }

    /// The serialised `type` name, for logs and filters.
    pub fn kind(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
            .unwrap_or_default()
    }
}

/// Where events go. Cloneable; a closed receiver is not an error (a UI that
/// went away must not fail a run).
#[derive(Clone, Debug, Default)]
pub struct EventSink {
    tx: Option<UnboundedSender<AgentEvent>>,
}

impl EventSink {
    pub fn new(tx: UnboundedSender<AgentEvent>) -> Self {
        EventSink { tx: Some(tx) }
    }

    /// A sink that drops everything.
    pub fn none() -> Self {
        EventSink { tx: None }
    }

    pub fn emit(&self, event: AgentEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_with_snake_case_type() {
        let e = AgentEvent::Tool(ToolEvent::ToolBatchStarted {
            iter: 1,
            batch: 0,
            mode: BatchMode::Parallel,
            calls: vec![],
        });
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "tool_batch_started");
        assert_eq!(v["mode"], "parallel");
        let f = AgentEvent::Tool(ToolEvent::ToolCallFinished {
            iter: 1,
            call_id: "c".into(),
            tool: "t".into(),
            status: ToolCallStatus::Denied,
            elapsed_ms: 0,
            preview: String::new(),
            error_code: None,
            output: None,
        });
        assert_eq!(serde_json::to_value(&f).unwrap()["status"], "denied");
        assert_eq!(f.kind(), "tool_call_finished");
        let back: AgentEvent = serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }
}
