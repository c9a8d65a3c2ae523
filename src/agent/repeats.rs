//! The same failing call, again (docs §1.3 step 14). A small model that
//! gets an error often sends the very same call back; the loop says so once
//! and stops the run when it keeps doing it, instead of spending every
//! iteration on one refusal.

use std::collections::HashMap;

use serde_json::Value;

use crate::tools::CallOutcome;
use crate::tools::events::ToolCallStatus;
use crate::tools::scheduler::dedupe_key;

/// The second identical failure gets a steering message.
pub const WARN_AT: u32 = 2;
/// The third stops the run.
pub const STOP_AT: u32 = 3;

/// A call that failed the same way again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repeat {
    pub tool: String,
    pub count: u32,
    /// The failure's message, in one line.
    pub error: String,
}

impl Repeat {
    /// The steering text for the second time.
    pub fn warning(&self) -> String {
        format!(
            "[SYSTEM] `{}` failed {} times with the same arguments: {}. Do not send that call again: change its arguments, use another tool, or answer with what you have and say what failed.",
            self.tool, self.count, self.error
        )
    }

    /// The run's reason when it is stopped.
    pub fn reason(&self) -> String {
        format!(
            "stopped: the model sent the same failing call {} times: {} ({})",
            self.count, self.tool, self.error
        )
    }
}

/// Failed calls of one run by tool and canonical arguments.
#[derive(Debug, Default)]
pub struct RepeatedFailures {
    counts: HashMap<String, u32>,
}

impl RepeatedFailures {
    /// Counts a failed call; the repeat when it reached [`WARN_AT`] or more.
    pub fn record(&mut self, o: &CallOutcome) -> Option<Repeat> {
        if !matches!(o.status, ToolCallStatus::Error | ToolCallStatus::Timeout) {
            return None;
        }
        let n = self
            .counts
            .entry(dedupe_key(o.call.name(), &o.args))
            .or_insert(0);
        *n += 1;
        (*n >= WARN_AT).then(|| Repeat {
            tool: o.call.name().to_string(),
            count: *n,
            error: error_line(&o.raw),
        })
    }
}

/// The `error` or `message` of a structured result, else its text, cut.
fn error_line(raw: &str) -> String {
    let text = serde_json::from_str::<Value>(raw)
        .ok()
        .and_then(|v| {
            ["error", "message"]
                .iter()
                .find_map(|k| v.get(k).and_then(Value::as_str).map(String::from))
        })
        .unwrap_or_else(|| raw.to_string());
    crate::text::one_line(&text, 160)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::model::ToolCall;

    fn failed(args: &str) -> CallOutcome {
        let raw = json!({"status": "error", "error": "one ticker per call"}).to_string();
        CallOutcome {
            call: ToolCall::new("c", "get_market_data", args),
            args: serde_json::from_str(args).unwrap(),
            status: ToolCallStatus::Error,
            model_content: raw.clone(),
            raw,
            output: None,
            elapsed: Duration::ZERO,
            error_code: None,
            executed: true,
        }
    }

    #[test]
    fn the_same_failure_is_counted_by_arguments() {
        let mut r = RepeatedFailures::default();
        assert_eq!(r.record(&failed(r#"{"symbol":"A,B"}"#)), None);
        assert_eq!(r.record(&failed(r#"{"symbol":"C,D"}"#)), None);
        let second = r.record(&failed(r#"{"symbol":"A,B"}"#)).unwrap();
        assert_eq!(second.count, WARN_AT);
        assert!(second.warning().contains("one ticker per call"));
        let third = r.record(&failed(r#"{"symbol":"A,B"}"#)).unwrap();
        assert_eq!(third.count, STOP_AT);
        assert!(
            third.reason().starts_with(
                "stopped: the model sent the same failing call 3 times: get_market_data"
            )
        );
    }
}
