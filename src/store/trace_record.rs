//! The records of `trace.jsonl` as types (docs/5-state.md §5.3): one variant
//! per record `type`, its fields in the order they are written. Writers build
//! a [`TraceRecord`] and never a JSON literal, so a record cannot lose or
//! misspell a field; the agent builds the records that mirror an event from
//! the event itself (`agent::traced`). `ts` is added by the writer, large text
//! fields are moved to sidecars by it as well.

use serde::Serialize;
use serde_json::{Map, Value};

use super::run_state::Status;
use crate::model::Role;

/// One line of the trace, before the writer adds `ts` and offloads large
/// fields. `iter` is session-monotonic (docs/5-state.md §5.4).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceRecord {
    Start {
        iter: u64,
        run_id: String,
        prompt: String,
    },
    Message {
        iter: u64,
        role: Role,
        content: String,
    },
    Cancelled {
        iter: u64,
    },
    PendingWriteDirective {
        iter: u64,
    },
    WrapUp {
        iter: u64,
        remaining: u32,
    },
    ForcedTextOnly {
        iter: u64,
    },
    StreamReset {
        iter: u64,
        reason: String,
        error: String,
    },
    /// The iteration's whole streamed text (the event carries a preview).
    Thinking {
        iter: u64,
        content: String,
    },
    ContentFilterCircuitBreaker {
        iter: u64,
        count: u32,
    },
    ContentFilterSkipped {
        iter: u64,
    },
    EmptyModelResponse {
        iter: u64,
    },
    ToolCallSyntaxInAnswer {
        iter: u64,
    },
    /// A reply wrote tool calls as text (docs §2.11.1): the form, the names
    /// called, those that are not tools (then nothing ran), and the JSON
    /// repairs the text needed.
    TextToolCall {
        iter: u64,
        form: String,
        tools: Vec<String>,
        unknown: Vec<String>,
        repairs: Vec<String>,
        /// Why the calls are an example shown in an answer, not calls
        /// (then nothing ran and the reply was the answer).
        #[serde(skip_serializing_if = "Option::is_none")]
        example: Option<String>,
        /// Calls refused because their tools write beyond the run.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        refused: Vec<String>,
    },
    /// A reply held more tool calls than may run (docs §2.11.1): the
    /// first `limit` were taken, `refused` were not run.
    CallsOverLimit {
        iter: u64,
        calls: usize,
        limit: usize,
        refused: usize,
    },
    /// Figures of the answer found in no tool result of the run (docs §1.6).
    UnverifiedNumbers {
        iter: u64,
        numbers: Vec<String>,
        figures: usize,
    },
    /// A streaming reply was cut as a runaway (docs §2.11.2): why, and
    /// the cuts of the run so far.
    ReplyCut {
        iter: u64,
        reason: String,
        cuts: u32,
    },
    /// A reply that does not answer (docs §1.5): why, and its text.
    NonAnswer {
        iter: u64,
        kind: String,
        content: String,
    },
    /// The same failing call came back (docs §1.3 step 14).
    RepeatedFailure {
        iter: u64,
        tool: String,
        count: u32,
        error: String,
    },
    /// A context-size error: the window learned, and the retry (docs §3).
    ContextOverflow {
        iter: u64,
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        window: Option<u64>,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// The tools a run offers when they were chosen for its request or
    /// fitted to the window, and those held back (docs §4.7.1).
    ToolsChosen {
        iter: u64,
        /// `request` (chosen for it), `window` (cut to fit), `asked` (the
        /// model called one held back).
        reason: String,
        offered: Vec<String>,
        held_back: Vec<String>,
        /// Estimated tokens of the offered schemas, and what they could use.
        tokens: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        budget: Option<u64>,
    },
    /// Tools dropped after a context-size error the conversation could not
    /// be compacted out of (docs §3.9).
    ToolsDropped {
        iter: u64,
        dropped: Vec<String>,
        tokens_before: u64,
        tokens_after: u64,
    },
    AnswerRejected {
        iter: u64,
        issues: Vec<String>,
        content: String,
    },
    Answer {
        iter: u64,
        content: String,
    },
    CompactRequested {
        iter: u64,
        focus_topic: String,
    },
    End(EndRecord),
    ToolCall {
        iter: u64,
        tool: String,
        call_id: String,
        /// Redacted for the trace sink, whole.
        args: Value,
        batch: u32,
    },
    ToolResult {
        iter: u64,
        tool: String,
        call_id: String,
        /// `ok` or `error`.
        status: ToolResultStatus,
        /// The call's event status (`ok`, `timeout`, `denied`, …).
        outcome: String,
        elapsed_ms: u64,
        /// Redacted; the writer adds `preview` and may move it to a sidecar.
        result: String,
        #[serde(skip_serializing_if = "is_false")]
        blocked: bool,
    },
    /// The approval policy's decision on one call (docs §2.14.3).
    Approval {
        iter: u64,
        call_id: String,
        tool: String,
        target: String,
        access: String,
        decision: crate::model::approval::Decision,
        mode: crate::model::approval::ApprovalMode,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    ToolSkipped {
        iter: u64,
        tool: String,
        call_id: String,
    },
    /// L1.
    Microcompact(LayerRecord),
    /// L2.
    Collapse(LayerRecord),
    /// L3 (and L4, L5).
    Compact(CompactRecord),
}

/// `end`: how a run ended. Recovery (docs/5-state.md §5.4) adds `run_id`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndRecord {
    pub iter: u64,
    pub status: Status,
    pub iterations: u32,
    pub reason: String,
    #[serde(skip_serializing_if = "is_false")]
    pub degraded: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub stalled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// `status` of a `tool_result`: `ok` also for a skipped duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolResultStatus {
    Ok,
    Error,
}

/// The fields every compaction record has.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerRecord {
    pub iter: u64,
    /// `threshold`, `tool` or `user`.
    pub trigger: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_touched: usize,
    pub estimator: String,
    pub ineffective: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive_path: Option<String>,
}

/// `compact`: the layer's fields, then what the summary did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompactRecord {
    #[serde(flatten)]
    pub layer: LayerRecord,
    #[serde(flatten)]
    pub outcome: CompactOutcome,
}

/// What an L3 compaction did, as extra fields of its record.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CompactOutcome {
    /// Nothing was old enough to summarise (`nothing_to_compress: true`).
    NothingToCompress {
        nothing_to_compress: bool,
    },
    Summarized {
        /// `(none)` when no focus was asked for.
        focus_topic: String,
        summary_chunks: usize,
        summary: String,
        head: usize,
        tail: usize,
        pairs_removed: usize,
        pairs_stubbed: usize,
        /// A second summary in the same run (L5).
        iterative: bool,
    },
    Failed {
        error: String,
    },
}

impl CompactOutcome {
    pub fn nothing_to_compress() -> Self {
        CompactOutcome::NothingToCompress {
            nothing_to_compress: true,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl TraceRecord {
    /// The record as a JSON object, fields in declaration order.
    pub fn to_object(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(o)) => o,
            // Every variant is a struct of plain fields; serialising one
            // cannot fail or give a non-object.
            _ => Map::new(),
        }
    }

    /// The record's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            TraceRecord::Start { .. } => "start",
            TraceRecord::Message { .. } => "message",
            TraceRecord::Cancelled { .. } => "cancelled",
            TraceRecord::PendingWriteDirective { .. } => "pending_write_directive",
            TraceRecord::WrapUp { .. } => "wrap_up",
            TraceRecord::ForcedTextOnly { .. } => "forced_text_only",
            TraceRecord::StreamReset { .. } => "stream_reset",
            TraceRecord::Thinking { .. } => "thinking",
            TraceRecord::ContentFilterCircuitBreaker { .. } => "content_filter_circuit_breaker",
            TraceRecord::ContentFilterSkipped { .. } => "content_filter_skipped",
            TraceRecord::EmptyModelResponse { .. } => "empty_model_response",
            TraceRecord::ToolCallSyntaxInAnswer { .. } => "tool_call_syntax_in_answer",
            TraceRecord::TextToolCall { .. } => "text_tool_call",
            TraceRecord::CallsOverLimit { .. } => "calls_over_limit",
            TraceRecord::UnverifiedNumbers { .. } => "unverified_numbers",
            TraceRecord::RepeatedFailure { .. } => "repeated_failure",
            TraceRecord::ReplyCut { .. } => "reply_cut",
            TraceRecord::NonAnswer { .. } => "non_answer",
            TraceRecord::ContextOverflow { .. } => "context_overflow",
            TraceRecord::ToolsChosen { .. } => "tools_chosen",
            TraceRecord::ToolsDropped { .. } => "tools_dropped",
            TraceRecord::AnswerRejected { .. } => "answer_rejected",
            TraceRecord::Answer { .. } => "answer",
            TraceRecord::CompactRequested { .. } => "compact_requested",
            TraceRecord::End(_) => "end",
            TraceRecord::ToolCall { .. } => "tool_call",
            TraceRecord::ToolResult { .. } => "tool_result",
            TraceRecord::ToolSkipped { .. } => "tool_skipped",
            TraceRecord::Approval { .. } => "approval",
            TraceRecord::Microcompact(_) => "microcompact",
            TraceRecord::Collapse(_) => "collapse",
            TraceRecord::Compact(_) => "compact",
        }
    }
}

impl From<TraceRecord> for Value {
    fn from(r: TraceRecord) -> Value {
        Value::Object(r.to_object())
    }
}

#[cfg(test)]
mod tests {
    //! Each record serialises to exactly the text of the JSON literal its
    //! writer built before records were typed: same keys, same order.
    use super::*;
    use serde_json::json;

    fn same(record: TraceRecord, literal: Value) {
        let typed = serde_json::to_string(&Value::from(record.clone())).unwrap();
        assert_eq!(typed, literal.to_string(), "{}", record.kind());
        assert_eq!(literal["type"], record.kind());
    }

    fn layer(archive_path: Option<&str>) -> LayerRecord {
        LayerRecord {
            iter: 4,
            trigger: "threshold".into(),
            tokens_before: 900,
            tokens_after: 300,
            messages_touched: 2,
            estimator: "chars4".into(),
            ineffective: false,
            archive_path: archive_path.map(String::from),
        }
    }

    #[test]
    fn loop_records_keep_their_literal_text() {
        let s = |t: &str| t.to_string();
        same(
            TraceRecord::Start {
                iter: 1,
                run_id: s("r"),
                prompt: s("p"),
            },
            json!({"type": "start", "iter": 1, "run_id": "r", "prompt": "p"}),
        );
        same(
            TraceRecord::Message {
                iter: 1,
                role: Role::User,
                content: s("p"),
            },
            json!({"type": "message", "iter": 1, "role": "user", "content": "p"}),
        );
        same(
            TraceRecord::Message {
                iter: 2,
                role: Role::Assistant,
                content: s("a"),
            },
            json!({"type": "message", "iter": 2, "role": "assistant", "content": "a"}),
        );
        for (r, t) in [
            (TraceRecord::Cancelled { iter: 3 }, "cancelled"),
            (
                TraceRecord::PendingWriteDirective { iter: 3 },
                "pending_write_directive",
            ),
            (TraceRecord::ForcedTextOnly { iter: 3 }, "forced_text_only"),
            (
                TraceRecord::ContentFilterSkipped { iter: 3 },
                "content_filter_skipped",
            ),
            (
                TraceRecord::EmptyModelResponse { iter: 3 },
                "empty_model_response",
            ),
            (
                TraceRecord::ToolCallSyntaxInAnswer { iter: 3 },
                "tool_call_syntax_in_answer",
            ),
        ] {
            same(r, json!({"type": t, "iter": 3}));
        }
        same(
            TraceRecord::WrapUp {
                iter: 5,
                remaining: 2,
            },
            json!({"type": "wrap_up", "iter": 5, "remaining": 2}),
        );
        same(
            TraceRecord::StreamReset {
                iter: 5,
                reason: s("provider_stream_retry"),
                error: s("e"),
            },
            json!({"type": "stream_reset", "iter": 5, "reason": "provider_stream_retry", "error": "e"}),
        );
        same(
            TraceRecord::Thinking {
                iter: 5,
                content: s("t"),
            },
            json!({"type": "thinking", "iter": 5, "content": "t"}),
        );
        same(
            TraceRecord::ContentFilterCircuitBreaker { iter: 5, count: 3 },
            json!({"type": "content_filter_circuit_breaker", "iter": 5, "count": 3}),
        );
        same(
            TraceRecord::AnswerRejected {
                iter: 5,
                issues: vec![s("i")],
                content: s("d"),
            },
            json!({"type": "answer_rejected", "iter": 5, "issues": ["i"], "content": "d"}),
        );
        same(
            TraceRecord::Answer {
                iter: 5,
                content: s("d"),
            },
            json!({"type": "answer", "iter": 5, "content": "d"}),
        );
        same(
            TraceRecord::CompactRequested {
                iter: 5,
                focus_topic: s("f"),
            },
            json!({"type": "compact_requested", "iter": 5, "focus_topic": "f"}),
        );
    }

    #[test]
    fn end_records_keep_their_literal_text() {
        let end = |degraded, stalled| EndRecord {
            iter: 7,
            status: Status::Success,
            iterations: 2,
            reason: "final answer delivered".into(),
            degraded,
            stalled,
            run_id: None,
        };
        let mut literal = json!({"type": "end", "iter": 7, "status": "success", "iterations": 2, "reason": "final answer delivered"});
        same(TraceRecord::End(end(false, false)), literal.clone());
        literal["degraded"] = json!(true);
        literal["stalled"] = json!(true);
        same(TraceRecord::End(end(true, true)), literal);
        // Recovery's record: run_id last (it used to follow `reason`).
        let recovered = EndRecord {
            status: Status::Interrupted,
            iterations: 0,
            run_id: Some("r1".into()),
            ..end(false, false)
        };
        same(
            TraceRecord::End(recovered),
            json!({"type": "end", "iter": 7, "status": "interrupted", "iterations": 0,
                   "reason": "final answer delivered", "run_id": "r1"}),
        );
    }

    #[test]
    fn tool_records_keep_their_literal_text() {
        same(
            TraceRecord::ToolCall {
                iter: 1,
                tool: "bash".into(),
                call_id: "c1".into(),
                args: json!({"cmd": "ls"}),
                batch: 0,
            },
            json!({"type": "tool_call", "iter": 1, "tool": "bash", "call_id": "c1",
                   "args": {"cmd": "ls"}, "batch": 0}),
        );
        let result = |blocked| TraceRecord::ToolResult {
            iter: 1,
            tool: "bash".into(),
            call_id: "c1".into(),
            status: ToolResultStatus::Error,
            outcome: "denied".into(),
            elapsed_ms: 3,
            result: "r".into(),
            blocked,
        };
        let mut literal = json!({
            "type": "tool_result", "iter": 1, "tool": "bash", "call_id": "c1",
            "status": "error", "outcome": "denied", "elapsed_ms": 3, "result": "r",
        });
        same(result(false), literal.clone());
        literal["blocked"] = Value::Bool(true);
        same(result(true), literal);
        same(
            TraceRecord::ToolSkipped {
                iter: 1,
                tool: "bash".into(),
                call_id: "c1".into(),
            },
            json!({"type": "tool_skipped", "iter": 1, "tool": "bash", "call_id": "c1"}),
        );
    }

    #[test]
    fn compaction_records_keep_their_literal_text() {
        let base = json!({
            "iter": 4, "trigger": "threshold", "tokens_before": 900, "tokens_after": 300,
            "messages_touched": 2, "estimator": "chars4", "ineffective": false,
        });
        let with = |kind: &str, extra: Value| {
            let mut o = Map::new();
            o.insert("type".into(), json!(kind));
            o.extend(base.as_object().unwrap().clone());
            o.extend(extra.as_object().unwrap().clone());
            Value::Object(o)
        };
        same(
            TraceRecord::Microcompact(layer(None)),
            with("microcompact", json!({})),
        );
        same(
            TraceRecord::Collapse(layer(Some("transcripts/a.jsonl"))),
            with("collapse", json!({"archive_path": "transcripts/a.jsonl"})),
        );
        same(
            TraceRecord::Compact(CompactRecord {
                layer: layer(None),
                outcome: CompactOutcome::nothing_to_compress(),
            }),
            with("compact", json!({"nothing_to_compress": true})),
        );
        same(
            TraceRecord::Compact(CompactRecord {
                layer: layer(Some("transcripts/t.jsonl")),
                outcome: CompactOutcome::Summarized {
                    focus_topic: "(none)".into(),
                    summary_chunks: 1,
                    summary: "s".into(),
                    head: 6,
                    tail: 3,
                    pairs_removed: 0,
                    pairs_stubbed: 1,
                    iterative: true,
                },
            }),
            with(
                "compact",
                json!({"archive_path": "transcripts/t.jsonl", "focus_topic": "(none)",
                       "summary_chunks": 1, "summary": "s", "head": 6, "tail": 3,
                       "pairs_removed": 0, "pairs_stubbed": 1, "iterative": true}),
            ),
        );
        same(
            TraceRecord::Compact(CompactRecord {
                layer: layer(None),
                outcome: CompactOutcome::Failed { error: "e".into() },
            }),
            with("compact", json!({"error": "e"})),
        );
    }
}
