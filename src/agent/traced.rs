//! The trace records that mirror an event (docs/5-state.md §5.3). The loop
//! builds such a record from the event it emits, never separately, so the
//! two cannot drift. Records with more than their event says (`end`, the
//! compaction records, `answer_rejected`, `thinking`) are built from the
//! same source as their event instead (`RunOutcome`, `LayerReport`).

use super::events::AgentEvent;
use crate::store::TraceRecord;

/// The record `event` leaves in the trace, if it leaves one on its own.
pub fn record_of(event: &AgentEvent) -> Option<TraceRecord> {
    Some(match event {
        AgentEvent::WrapUp {
            iter, remaining, ..
        } => TraceRecord::WrapUp {
            iter: *iter,
            remaining: *remaining,
        },
        AgentEvent::ForcedTextOnly { iter } => TraceRecord::ForcedTextOnly { iter: *iter },
        AgentEvent::StreamReset {
            iter,
            reason,
            error,
            ..
        } => TraceRecord::StreamReset {
            iter: *iter,
            reason: reason.clone(),
            error: error.clone(),
        },
        AgentEvent::ContentFiltered { iter, .. } => {
            TraceRecord::ContentFilterSkipped { iter: *iter }
        }
        AgentEvent::EmptyResponse { iter, .. } => TraceRecord::EmptyModelResponse { iter: *iter },
        AgentEvent::Answer { iter, content, .. } => TraceRecord::Answer {
            iter: *iter,
            content: content.clone(),
        },
        AgentEvent::UnverifiedNumbers {
            iter,
            numbers,
            figures,
        } => TraceRecord::UnverifiedNumbers {
            iter: *iter,
            numbers: numbers.clone(),
            figures: *figures,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Every event that is traced gives a record whose fields all appear in
    /// the event with the same values (`type` aside).
    #[test]
    fn traced_events_give_records_with_their_fields() {
        let traced = [
            AgentEvent::WrapUp {
                iter: 4,
                remaining: 2,
                max_iterations: 6,
            },
            AgentEvent::ForcedTextOnly { iter: 6 },
            AgentEvent::StreamReset {
                iter: 2,
                reason: "provider_stream_retry".into(),
                provider: "p".into(),
                model: "m".into(),
                error: "reset".into(),
                retry_in_ms: 500,
            },
            AgentEvent::ContentFiltered {
                iter: 3,
                consecutive: 1,
                total: 1,
                limit: 3,
            },
            AgentEvent::EmptyResponse {
                iter: 3,
                consecutive: 1,
            },
            AgentEvent::Answer {
                iter: 7,
                content: "done".into(),
                degraded: false,
            },
            AgentEvent::UnverifiedNumbers {
                iter: 7,
                numbers: vec!["13.31".into()],
                figures: 2,
            },
        ];
        let kinds: Vec<&str> = traced
            .iter()
            .map(|e| {
                let record = record_of(e).unwrap();
                let (Value::Object(r), Value::Object(ev)) = (
                    Value::from(record.clone()),
                    serde_json::to_value(e).unwrap(),
                ) else {
                    panic!("not objects")
                };
                assert!(r.len() > 1, "{} has fields", record.kind());
                for (k, v) in r.iter().filter(|(k, _)| *k != "type") {
                    assert_eq!(ev.get(k), Some(v), "{} {k}", record.kind());
                }
                record.kind()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "wrap_up",
                "forced_text_only",
                "stream_reset",
                "content_filter_skipped",
                "empty_model_response",
                "answer",
                "unverified_numbers",
            ]
        );
        assert_eq!(record_of(&untraced_event()), None);
    }

    fn untraced_event() -> AgentEvent {
        AgentEvent::IterationStarted {
            iter: 1,
            step: 1,
            max_iterations: 3,
        }
    }

    /// `tool_result.outcome` is the call's event status, by the same name.
    #[test]
    fn tool_call_status_names_match_their_serde_names() {
        use crate::tools::events::ToolCallStatus::*;
        for status in [Ok, Error, Timeout, Cancelled, Skipped, Denied] {
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                Value::from(status.as_str())
            );
        }
    }
}
