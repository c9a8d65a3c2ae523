//! What the loop does with tool calls a reply wrote as text (docs §1.5
//! step 2, §2.11.1): calls to offered tools become real calls; a call to a
//! name that is not a tool gets one correction that lists the tools, and
//! is never delivered as an answer.

use crate::llm::Response;
use crate::llm::text_calls::{self, TextCalls};
use crate::model::ToolCall;
use crate::store::TraceRecord;
use crate::tools::Registry;

/// What a reply's text amounts to.
pub enum TextCallDecision {
    /// No text-form call: the reply goes on as it is.
    NotACall(Response),
    /// The calls became real ones; `response` now carries them and only
    /// the prose around them as its text.
    Calls {
        response: Response,
        record: TraceRecord,
    },
    /// The text called names that are not tools here.
    Unknown {
        names: Vec<String>,
        record: TraceRecord,
        /// The steering text that lists the tools.
        correction: String,
    },
}

/// Screens a reply without native tool calls for text-form ones.
pub fn screen(response: Response, registry: &Registry, iter: u64) -> TextCallDecision {
    if !response.tool_calls.is_empty() || response.content.trim().is_empty() {
        return TextCallDecision::NotACall(response);
    }
    let Some(found) = text_calls::parse(&response.content) else {
        return TextCallDecision::NotACall(response);
    };
    let mut unknown: Vec<String> = Vec::new();
    for c in &found.calls {
        if registry.get(&c.name).is_none() && !unknown.contains(&c.name) {
            unknown.push(c.name.clone());
        }
    }
    let record = record(&found, &unknown, iter);
    if !unknown.is_empty() {
        let correction = correction(&unknown, registry);
        return TextCallDecision::Unknown {
            names: unknown,
            record,
            correction,
        };
    }
    let tool_calls = found
        .calls
        .iter()
        .enumerate()
        .map(|(n, c)| {
            ToolCall::new(
                format!("text_call_{iter}_{n}"),
                c.name.clone(),
                c.arguments.to_string(),
            )
        })
        .collect();
    TextCallDecision::Calls {
        response: Response {
            content: found.rest,
            tool_calls,
            ..response
        },
        record,
    }
}

fn record(found: &TextCalls, unknown: &[String], iter: u64) -> TraceRecord {
    TraceRecord::TextToolCall {
        iter,
        form: found.form.as_str().to_string(),
        tools: found.calls.iter().map(|c| c.name.clone()).collect(),
        unknown: unknown.to_vec(),
        repairs: found.repairs.iter().map(|r| r.to_string()).collect(),
    }
}

/// "[SYSTEM] There is no tool named X. The tools are: …".
fn correction(unknown: &[String], registry: &Registry) -> String {
    let names = unknown
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let noun = if unknown.len() == 1 {
        "no tool named"
    } else {
        "no tools named"
    };
    format!(
        "[SYSTEM] There is {noun} {names}. The tools are: {}. Call one of them with its arguments, or answer the user in plain text.",
        registry.names().join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::default_registry;

    fn reply(text: &str) -> Response {
        Response {
            content: text.to_string(),
            ..Response::default()
        }
    }

    #[test]
    fn offered_names_become_calls_with_their_prose_kept() {
        let reg = default_registry();
        let text = "I'll read it.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n```";
        let TextCallDecision::Calls { response, record } = screen(reply(text), &reg, 4) else {
            panic!("not converted");
        };
        assert_eq!(response.content, "I'll read it.");
        assert_eq!(response.tool_calls[0].id, "text_call_4_0");
        assert_eq!(response.tool_calls[0].name(), "read_file");
        assert_eq!(
            response.tool_calls[0].function.arguments,
            r#"{"path":"a.md"}"#
        );
        assert_eq!(record.kind(), "text_tool_call");
    }

    #[test]
    fn an_unknown_name_gets_a_correction_listing_the_tools() {
        let reg = default_registry();
        let text = "```json\n{\"name\": \"backtest_design\", \"arguments\": {}}\n```";
        let TextCallDecision::Unknown {
            names, correction, ..
        } = screen(reply(text), &reg, 1)
        else {
            panic!("not refused");
        };
        assert_eq!(names, vec!["backtest_design"]);
        assert!(
            correction.contains("no tool named `backtest_design`"),
            "{correction}"
        );
        assert!(correction.contains("read_file"), "{correction}");
    }

    #[test]
    fn plain_answers_and_native_calls_pass() {
        let reg = default_registry();
        assert!(matches!(
            screen(reply("RSI was 41."), &reg, 1),
            TextCallDecision::NotACall(_)
        ));
        let native = Response {
            content: "```json\n{\"name\": \"read_file\", \"arguments\": {}}\n```".into(),
            tool_calls: vec![ToolCall::new("c", "list_dir", "{}")],
            ..Response::default()
        };
        assert!(matches!(
            screen(native, &reg, 1),
            TextCallDecision::NotACall(_)
        ));
    }
}
