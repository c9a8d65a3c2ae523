//! The tool calls of one run and which of them failed, for the honest
//! terminal status of docs §1.4: an answered run whose every tool call
//! failed is `failed`, one where some failed is `partial`, and the reason
//! names the failed calls with why.
//!
//! What counts (docs §1.4): a call that ran and ended `ok` counts as done;
//! one that ended `error` (the tool's own error, or a call the scheduler
//! refused as malformed: unknown tool, invalid arguments), `timeout` or
//! `cancelled` counts as failed. A call that never ran by policy — a
//! `skipped` duplicate of an earlier success, or one the authorization hook
//! `denied` — is not counted either way: the first reuses a result the run
//! has, the second is a decision made for the user, not a failure of the
//! work.

use serde_json::Value;

use super::events::RunStatus;
use crate::tools::CallOutcome;
use crate::tools::events::ToolCallStatus;

/// Distinct failures named in a reason before "… and N more".
const NAMED_FAILURES: usize = 3;
/// How much of one failure's message a reason keeps.
const WHY_CHARS: usize = 120;

/// One failed call: its tool and why, in a few words.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Failure {
    tool: String,
    why: String,
}

/// The counted tool calls of a run and its failures, in call order.
#[derive(Clone, Debug, Default)]
pub struct ToolTally {
    calls: u32,
    failures: Vec<Failure>,
}

impl ToolTally {
    /// Counts one call by its outcome (see the module doc).
    pub fn record(&mut self, o: &CallOutcome) {
        match o.status {
            ToolCallStatus::Ok => self.calls += 1,
            ToolCallStatus::Error | ToolCallStatus::Timeout | ToolCallStatus::Cancelled => {
                self.calls += 1;
                self.failures.push(Failure {
                    tool: o.call.name().to_string(),
                    why: why(&o.raw, o.status),
                });
            }
            ToolCallStatus::Skipped | ToolCallStatus::Denied => {}
        }
    }

    pub fn calls(&self) -> u32 {
        self.calls
    }

    pub fn failed(&self) -> u32 {
        self.failures.len() as u32
    }

    /// The status an answered run gets from its tool calls: `None` when
    /// none failed, `failed` when all did, else `partial`; with the reason.
    pub fn verdict(&self) -> Option<(RunStatus, String)> {
        let failed = self.failed();
        if failed == 0 {
            return None;
        }
        let status = if failed >= self.calls {
            RunStatus::Failed
        } else {
            RunStatus::Partial
        };
        Some((status, self.reason()))
    }

    /// "2 of 3 tool calls failed: get_market_data (no data for ZZZZ), …":
    /// distinct failures in call order, repeats counted.
    fn reason(&self) -> String {
        let mut distinct: Vec<(&Failure, usize)> = Vec::new();
        for f in &self.failures {
            match distinct.iter_mut().find(|(d, _)| *d == f) {
                Some((_, n)) => *n += 1,
                None => distinct.push((f, 1)),
            }
        }
        let named: Vec<String> = distinct
            .iter()
            .take(NAMED_FAILURES)
            .map(|(f, n)| {
                let times = if *n > 1 {
                    format!(" ×{n}")
                } else {
                    String::new()
                };
                format!("{}{times} ({})", f.tool, f.why)
            })
            .collect();
        let more = distinct.len().saturating_sub(NAMED_FAILURES);
        let tail = if more > 0 {
            format!(" … and {more} more")
        } else {
            String::new()
        };
        format!(
            "{} of {} tool call{} failed: {}{tail}",
            self.failed(),
            self.calls,
            if self.calls == 1 { "" } else { "s" },
            named.join(", ")
        )
    }
}

/// Why a call failed, in one short line: the structured result's `error`
/// or `message`, else the result's own text, else the status; only its
/// first clause (up to `; `), where the details after it (the sources
/// tried, say) would crowd out the other failures.
fn why(raw: &str, status: ToolCallStatus) -> String {
    let from_json = serde_json::from_str::<Value>(raw).ok().and_then(|v| {
        ["error", "message"]
            .iter()
            .find_map(|k| v.get(k).and_then(Value::as_str).map(String::from))
    });
    let text = from_json.unwrap_or_else(|| raw.to_string());
    let clause = text.split("; ").next().unwrap_or_default();
    let line = crate::text::one_line(clause, WHY_CHARS);
    if line.is_empty() {
        status.as_str().to_string()
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::model::ToolCall;

    fn outcome(tool: &str, status: ToolCallStatus, raw: &str) -> CallOutcome {
        CallOutcome {
            call: ToolCall::new("c", tool, "{}"),
            args: json!({}),
            status,
            raw: raw.to_string(),
            output: None,
            model_content: raw.to_string(),
            elapsed: Duration::ZERO,
            error_code: None,
            executed: true,
        }
    }

    #[test]
    fn all_failed_is_failed_some_is_partial_none_is_nothing() {
        let nodata =
            json!({"status": "error", "error": "no data for ZZZZ; tried: embedded, local"})
                .to_string();
        let mut t = ToolTally::default();
        assert_eq!(t.verdict(), None, "no calls: nothing to say");
        t.record(&outcome("get_market_data", ToolCallStatus::Error, &nodata));
        let (status, reason) = t.verdict().unwrap();
        assert_eq!(status, RunStatus::Failed);
        assert_eq!(
            reason,
            "1 of 1 tool call failed: get_market_data (no data for ZZZZ)"
        );
        t.record(&outcome("list_dir", ToolCallStatus::Ok, "[]"));
        t.record(&outcome(
            "backtest",
            ToolCallStatus::Timeout,
            &json!({"status": "error", "message": "'backtest' did not finish within 60s"})
                .to_string(),
        ));
        let (status, reason) = t.verdict().unwrap();
        assert_eq!(status, RunStatus::Partial);
        assert_eq!(
            reason,
            "2 of 3 tool calls failed: get_market_data (no data for ZZZZ), backtest ('backtest' did not finish within 60s)"
        );
    }

    #[test]
    fn skipped_and_denied_calls_are_not_counted() {
        let mut t = ToolTally::default();
        t.record(&outcome("read_file", ToolCallStatus::Ok, "text"));
        t.record(&outcome("read_file", ToolCallStatus::Skipped, "{}"));
        t.record(&outcome("shell", ToolCallStatus::Denied, "{}"));
        assert_eq!((t.calls(), t.failed()), (1, 0));
        assert_eq!(t.verdict(), None);
    }

    #[test]
    fn repeats_are_counted_and_long_lists_cut() {
        let mut t = ToolTally::default();
        let err = |m: &str| json!({"status": "error", "error": m}).to_string();
        for _ in 0..3 {
            t.record(&outcome(
                "get_market_data",
                ToolCallStatus::Error,
                &err("no data"),
            ));
        }
        for tool in ["a", "b", "c", "d"] {
            t.record(&outcome(
                tool,
                ToolCallStatus::Error,
                &err(&"x".repeat(300)),
            ));
        }
        let (status, reason) = t.verdict().unwrap();
        assert_eq!(status, RunStatus::Failed);
        assert!(
            reason.starts_with("7 of 7 tool calls failed: get_market_data ×3 (no data), a ("),
            "{reason}"
        );
        assert!(reason.ends_with("… and 2 more"), "{reason}");
        assert!(reason.chars().count() < 400, "{reason}");
    }
}
