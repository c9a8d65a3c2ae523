//! What one compaction layer did, and the names it goes by (docs/3-compaction.md):
//! [`Layer`] and [`Trigger`] name a layer and why it ran; a [`LayerReport`]
//! is the one source of both the `compaction_finished` event and the trace
//! record, so the two always agree.

use super::super::events::AgentEvent;
use crate::store::TraceRecord;
use crate::store::trace_record::{CompactOutcome, CompactRecord, LayerRecord};

/// A compaction layer. L4 (the `compact` tool) and L5 (a second summary in
/// one run) are [`Layer::Auto`] with the `tool` trigger or `iterative` set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// L1: old tool results become stubs.
    Micro,
    /// L2: long old messages are cut.
    Collapse,
    /// L3: the head is summarised, the tail kept.
    Auto,
}

impl Layer {
    /// The name events carry (`layer` of `compaction_started`/`_finished`).
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Micro => "microcompact",
            Layer::Collapse => "collapse",
            Layer::Auto => "auto_compact",
        }
    }

    /// Its slot in per-layer state (gates, ineffective marks).
    pub(super) fn index(self) -> usize {
        match self {
            Layer::Micro => 0,
            Layer::Collapse => 1,
            Layer::Auto => 2,
        }
    }
}

/// Why a layer ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The context crossed the layer's gate.
    Threshold,
    /// The model called the `compact` tool (L4).
    Tool,
    /// The user asked (`/compact`).
    User,
    /// The server refused the request as larger than its context window
    /// (docs §3.9); the context is fitted and the call retried once.
    ContextError,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Threshold => "threshold",
            Trigger::Tool => "tool",
            Trigger::User => "user",
            Trigger::ContextError => "context_error",
        }
    }
}

/// One layer's run, as reported when it finishes.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerReport {
    pub iter: u64,
    pub layer: Layer,
    pub trigger: Trigger,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_touched: usize,
    /// Where the originals (L1, L2) or the full list (L3) were archived.
    pub archive_path: Option<String>,
    /// L3: the summary call failed and a note was used.
    pub degraded: bool,
    /// L3: what the summary did; `None` when there was nothing to compress.
    pub summary: Option<CompactOutcome>,
}

impl LayerReport {
    /// Its `compaction_finished` event.
    pub fn event(&self, ineffective: bool) -> AgentEvent {
        AgentEvent::CompactionFinished {
            iter: self.iter,
            layer: self.layer.as_str().into(),
            trigger: self.trigger.as_str().into(),
            tokens_before: self.tokens_before,
            tokens_after: self.tokens_after,
            messages_touched: self.messages_touched,
            archive_path: self.archive_path.clone(),
            ineffective,
            degraded: self.degraded,
        }
    }

    /// Its trace record: `microcompact`, `collapse` or `compact`.
    pub fn trace_record(&self, estimator: &str, ineffective: bool) -> TraceRecord {
        let record = LayerRecord {
            iter: self.iter,
            trigger: self.trigger.as_str().into(),
            tokens_before: self.tokens_before,
            tokens_after: self.tokens_after,
            messages_touched: self.messages_touched,
            estimator: estimator.into(),
            ineffective,
            archive_path: self.archive_path.clone(),
        };
        match self.layer {
            Layer::Micro => TraceRecord::Microcompact(record),
            Layer::Collapse => TraceRecord::Collapse(record),
            Layer::Auto => TraceRecord::Compact(CompactRecord {
                layer: record,
                outcome: self
                    .summary
                    .clone()
                    .unwrap_or_else(CompactOutcome::nothing_to_compress),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The event and the record of one report agree on every field they share.
    #[test]
    fn event_and_trace_record_agree() {
        for (layer, kind) in [
            (Layer::Micro, "microcompact"),
            (Layer::Collapse, "collapse"),
            (Layer::Auto, "compact"),
        ] {
            for trigger in [Trigger::Threshold, Trigger::Tool, Trigger::User] {
                let report = LayerReport {
                    iter: 9,
                    layer,
                    trigger,
                    tokens_before: 1_000,
                    tokens_after: 400,
                    messages_touched: 3,
                    archive_path: Some("transcripts/x.jsonl".into()),
                    degraded: false,
                    summary: None,
                };
                let event = serde_json::to_value(report.event(true)).unwrap();
                let record = Value::from(report.trace_record("bpe", true));
                assert_eq!(event["type"], "compaction_finished");
                assert_eq!(event["layer"], layer.as_str());
                assert_eq!(record["type"], kind);
                for field in [
                    "iter",
                    "trigger",
                    "tokens_before",
                    "tokens_after",
                    "messages_touched",
                    "archive_path",
                    "ineffective",
                ] {
                    assert_eq!(record[field], event[field], "{kind} {field}");
                }
                assert_eq!(record["trigger"], trigger.as_str());
                assert_eq!(record["estimator"], "bpe");
            }
        }
    }

    #[test]
    fn names_are_the_documented_strings() {
        let layers: Vec<&str> = [Layer::Micro, Layer::Collapse, Layer::Auto]
            .map(Layer::as_str)
            .to_vec();
        assert_eq!(layers, ["microcompact", "collapse", "auto_compact"]);
        let triggers = [Trigger::Threshold, Trigger::Tool, Trigger::User].map(Trigger::as_str);
        assert_eq!(triggers, ["threshold", "tool", "user"]);
        let nothing = LayerReport {
            iter: 1,
            layer: Layer::Auto,
            trigger: Trigger::User,
            tokens_before: 1,
            tokens_after: 1,
            messages_touched: 0,
            archive_path: None,
            degraded: false,
            summary: None,
        };
        assert_eq!(
            Value::from(nothing.trace_record("chars4", true))["nothing_to_compress"],
            json!(true)
        );
    }
}
