//! What the loop does with tool calls a reply wrote as text (docs §1.5
//! step 2, §2.11.1): a reply that *is* its calls has them run, except
//! calls to tools that write beyond the run, which are refused with a note,
//! and calls past [`MAX_CALLS_PER_REPLY`]; calls shown inside an
//! explanation, or after the user asked for an example, are the answer and
//! nothing runs; a call to a name that is not a tool gets one correction
//! that lists the tools, and is never delivered as an answer.

use crate::llm::Response;
use crate::llm::text_calls::{self, NotTheCall, TextCalls};
use crate::model::ToolCall;
use crate::store::TraceRecord;
use crate::tools::Registry;

/// Most tool calls one reply may run, native or written as text; the rest
/// are refused with a note (docs §2.11.1).
pub const MAX_CALLS_PER_REPLY: usize = 16;

/// What a reply's text amounts to.
pub enum TextCallDecision {
    /// No text-form call: the reply goes on as it is.
    NotACall(Response),
    /// Calls shown inside an explanation, or after the user asked for an
    /// example: the reply is the answer and nothing runs.
    Example {
        response: Response,
        record: TraceRecord,
    },
    /// The calls became real ones; `response` now carries those that may
    /// run (perhaps none) and only the prose around them as its text.
    Calls {
        response: Response,
        record: TraceRecord,
        refused: Refused,
    },
    /// The text called names that are not tools here.
    Unknown {
        names: Vec<String>,
        record: TraceRecord,
        /// The steering text that lists the tools.
        correction: String,
    },
}

/// Text-form calls that were not run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Refused {
    /// Calls to tools that write beyond the run, by tool name in call order.
    pub writes: Vec<String>,
    /// How many calls the reply held in all, when more than
    /// [`MAX_CALLS_PER_REPLY`].
    pub over_limit: Option<usize>,
    /// The tools of the calls after the reply's first step (its leading
    /// calls of one tool), left for the next reply, in call order.
    pub deferred: Vec<String>,
    /// The tool the first step called.
    pub step: Option<String>,
}

/// Screens a reply without native tool calls for text-form ones.
/// `user_message` is the user's latest message: when it asked for an
/// example or not to run anything, no call in the text runs.
pub fn screen(
    response: Response,
    registry: &Registry,
    iter: u64,
    user_message: &str,
) -> TextCallDecision {
    screen_with(response, registry, iter, user_message, false)
}

/// [`screen`], saying whether an approval policy judges the calls (docs
/// §2.14): then a call to a tool that writes is a call like any other and
/// the policy allows, asks or refuses it as it would a native one;
/// without one such a call is never run from text.
pub fn screen_with(
    response: Response,
    registry: &Registry,
    iter: u64,
    user_message: &str,
    policy_decides: bool,
) -> TextCallDecision {
    if !response.tool_calls.is_empty() || response.content.trim().is_empty() {
        return TextCallDecision::NotACall(response);
    }
    let Some(mut found) = text_calls::parse(&response.content) else {
        return TextCallDecision::NotACall(response);
    };
    let total = found.calls.len();
    found.calls.truncate(MAX_CALLS_PER_REPLY);
    let example = if text_calls::asks_for_example(user_message) {
        Some(NotTheCall::UserAskedForExample)
    } else {
        found
            .not_the_call()
            .filter(|why| !echo_before_the_call(&response.content, *why))
    };
    if let Some(why) = example {
        let record = record(&found, &[], iter, Some(why), &[]);
        return TextCallDecision::Example { response, record };
    }
    let mut unknown: Vec<String> = Vec::new();
    for c in &found.calls {
        if registry.get(&c.name).is_none() && !unknown.contains(&c.name) {
            unknown.push(c.name.clone());
        }
    }
    if !unknown.is_empty() {
        let record = record(&found, &unknown, iter, None, &[]);
        let correction = correction(&unknown, registry);
        return TextCallDecision::Unknown {
            names: unknown,
            record,
            correction,
        };
    }
    let writes_beyond_the_run = |name: &str| {
        !policy_decides
            && registry
                .get(name)
                .is_some_and(|t| t.caps().writes_beyond_the_run())
    };
    let refused = Refused {
        writes: found
            .calls
            .iter()
            .filter(|c| writes_beyond_the_run(&c.name))
            .map(|c| c.name.clone())
            .collect(),
        over_limit: (total > MAX_CALLS_PER_REPLY).then_some(total),
        ..Refused::default()
    };
    let record = record(&found, &[], iter, None, &refused.writes);
    let runnable: Vec<(usize, &text_calls::TextCall)> = found
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| !writes_beyond_the_run(&c.name))
        .collect();
    let (step, deferred) = first_step(&runnable);
    let refused = Refused {
        deferred: deferred.iter().map(|(_, c)| c.name.clone()).collect(),
        step: step.first().map(|(_, c)| c.name.clone()),
        ..refused
    };
    let tool_calls = step
        .iter()
        .map(|(n, c)| {
            ToolCall::new(
                format!("text_call_{iter}_{n}"),
                c.name.clone(),
                c.arguments.to_string(),
            )
        })
        .collect();
    // An echoed context block is not the model's prose to keep.
    let content = if response.content.trim_start().starts_with("<run-context>") {
        String::new()
    } else {
        found.rest
    };
    TextCallDecision::Calls {
        response: Response {
            content,
            tool_calls,
            ..response
        },
        record,
        refused,
    }
}

/// A reply written as text runs one step (docs §2.11.1): its leading calls
/// of one tool, each distinct call once. Measured, the 1.5B model wrote a
/// whole plan at once, "find the most volatile, then backtest it", with the
/// backtest's symbol guessed before the first result existed, and the same
/// read repeated five times; reason, act, then observe is what the loop is
/// for. Calls of one tool side by side (two symbols' prices) do not depend
/// on each other and run together.
type Numbered<'a> = (usize, &'a text_calls::TextCall);

fn first_step<'a>(calls: &[Numbered<'a>]) -> (Vec<Numbered<'a>>, Vec<Numbered<'a>>) {
    let Some((_, first)) = calls.first() else {
        return (Vec::new(), Vec::new());
    };
    let cut = calls
        .iter()
        .position(|(_, c)| c.name != first.name)
        .unwrap_or(calls.len());
    let (lead, rest) = calls.split_at(cut);
    let mut step: Vec<Numbered<'a>> = Vec::new();
    for call in lead {
        if !step.iter().any(|(_, c)| c.arguments == call.1.arguments) {
            step.push(*call);
        }
    }
    (step, rest.to_vec())
}

/// The note to the model for the calls a text reply left for later.
pub fn deferred_note(step: &str, deferred: &[String]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for n in deferred {
        if !distinct.contains(&n.as_str()) {
            distinct.push(n);
        }
    }
    let listed = distinct
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[SYSTEM] Only your `{step}` call ran: calls written as text run one step at a time, because a later call may depend on what this one shows. Read its result above; then call {listed} with what it says, or answer if it already answers the question."
    )
}

/// A lead-in that only repeats the run's context block (§4.3), and maybe
/// the user's question after it, before a call: measured, the 1.5B model
/// wrote the block out and then its call, which read as prose around an
/// example and ran nothing. The block is the prompt's, not the model's
/// words, so it says nothing about whether the call is meant.
fn echo_before_the_call(content: &str, why: NotTheCall) -> bool {
    matches!(why, NotTheCall::LongLeadIn | NotTheCall::ExampleLeadIn)
        && content.trim_start().starts_with("<run-context>")
}

fn record(
    found: &TextCalls,
    unknown: &[String],
    iter: u64,
    example: Option<NotTheCall>,
    refused: &[String],
) -> TraceRecord {
    TraceRecord::TextToolCall {
        iter,
        form: found.form.as_str().to_string(),
        tools: found.calls.iter().map(|c| c.name.clone()).collect(),
        unknown: unknown.to_vec(),
        repairs: found.repairs.iter().map(|r| r.to_string()).collect(),
        example: example.map(|e| e.as_str().to_string()),
        refused: refused.to_vec(),
    }
}

/// The note to the model for text-form calls refused because their tools
/// write beyond the run (docs §2.11.1).
pub fn writes_note(names: &[String]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for n in names {
        if !distinct.contains(&n.as_str()) {
            distinct.push(n);
        }
    }
    let listed = distinct
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[SYSTEM] Not run: your call to {listed}, written as text. A call written as text is never run for a tool that changes what outlasts this reply (memory, the user's files, the shell, an outside server), because such text may be an example rather than a request, and no approval policy is set here to ask the user (\"your files, your say\"). Tell the user in plain text what you would save or change so they can decide, and go on with the read-only tools."
    )
}

/// The note to the model when a reply held more calls than may run.
pub fn over_limit_note(total: usize) -> String {
    let rest = total.saturating_sub(MAX_CALLS_PER_REPLY);
    format!(
        "[SYSTEM] Your reply held {total} tool calls; at most {MAX_CALLS_PER_REPLY} run per reply, so the first {MAX_CALLS_PER_REPLY} were taken and the other {rest} were not run. Call the ones still needed in your next reply, or answer with what you have."
    )
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
        let TextCallDecision::Calls {
            response, record, ..
        } = screen(reply(text), &reg, 4, "read a.md")
        else {
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
    fn a_call_after_an_echo_of_the_run_context_runs() {
        let reg = default_registry();
        let text = "<run-context>\n## State\n- run_dir: /tmp/r\n\n## Current Date & Time\nToday is Monday.\nOther tools, offered as soon as you call one by name: sweep, bash.\n</run-context>\n\nWhat was SPY's maximum drawdown during 2008?\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n</tool_call>";
        let TextCallDecision::Calls { response, .. } = screen(reply(text), &reg, 1, "drawdown")
        else {
            panic!("not converted");
        };
        assert_eq!(response.tool_calls[0].name(), "read_file");
        assert_eq!(response.content, "", "the echo is not kept as prose");
        // Prose after the call still makes it an example, echo or not.
        let after = format!("{text}\nThat is how you would call it.");
        assert!(matches!(
            screen(reply(&after), &reg, 1, "drawdown"),
            TextCallDecision::Example { .. }
        ));
    }

    #[test]
    fn a_call_after_an_echo_of_the_whole_prompt_runs() {
        // Measured (eval prompt 5): the context block, then the `<tools>`
        // block's schemas, then the call in a fence. The schema named the
        // tool, so it read as a `<tools>` call with prose after it and
        // nothing ran, twice.
        let reg = default_registry();
        let text = "<run-context>\n## State\n- run_dir: /tmp/r\n</run-context>\n\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"technical_indicator\", \"description\": \"A ticker's indicators\", \"parameters\": {\"type\": \"object\", \"properties\": {\"symbol\": {\"type\": \"string\"}}, \"required\": [\"indicator\"]}}}\n</tools>\n\n```json\n{\n  \"name\": \"read_file\",\n  \"arguments\": {\"path\": \"IBM.csv\"}\n}\n```";
        let TextCallDecision::Calls { response, .. } = screen(reply(text), &reg, 1, "volatility")
        else {
            panic!("not converted");
        };
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(response.tool_calls[0].name(), "read_file");
        assert!(
            response.tool_calls[0]
                .function
                .arguments
                .contains("IBM.csv"),
            "{}",
            response.tool_calls[0].function.arguments
        );
        assert_eq!(response.content, "", "the echo is not kept as prose");
    }

    #[test]
    fn an_unknown_name_gets_a_correction_listing_the_tools() {
        let reg = default_registry();
        let text = "```json\n{\"name\": \"backtest_design\", \"arguments\": {}}\n```";
        let TextCallDecision::Unknown {
            names, correction, ..
        } = screen(reply(text), &reg, 1, "design a backtest")
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
    fn an_example_in_an_explanation_or_asked_for_is_no_call() {
        let reg = default_registry();
        let block = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n```";
        let explained = format!("A call looks like this:\n{block}\nThat is all.");
        let TextCallDecision::Example { response, record } =
            screen(reply(&explained), &reg, 2, "how do calls work?")
        else {
            panic!("run as a call");
        };
        assert_eq!(response.content, explained, "delivered whole");
        assert!(response.tool_calls.is_empty());
        let TraceRecord::TextToolCall { example, .. } = record else {
            panic!("{record:?}");
        };
        assert_eq!(example.as_deref(), Some("prose_after_the_call"));
        // The same bare block is an example when the user asked for one.
        let TextCallDecision::Example { record, .. } = screen(
            reply(block),
            &reg,
            2,
            "Show me the JSON for a call, don't run it",
        ) else {
            panic!("run as a call");
        };
        let TraceRecord::TextToolCall { example, .. } = record else {
            panic!("{record:?}");
        };
        assert_eq!(example.as_deref(), Some("user_asked_for_example"));
    }

    #[test]
    fn calls_to_tools_that_write_are_refused_and_the_rest_capped() {
        let reg = default_registry();
        let text = "<tools>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.md\", \"content\": \"x\"}}\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.md\"}}\n</tools>";
        let TextCallDecision::Calls {
            response, refused, ..
        } = screen(reply(text), &reg, 3, "read a.md")
        else {
            panic!("not screened as calls");
        };
        assert_eq!(refused.writes, vec!["write_file"]);
        assert_eq!(refused.over_limit, None);
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(response.tool_calls[0].name(), "read_file");
        assert_eq!(response.tool_calls[0].id, "text_call_3_1");
        assert!(writes_note(&refused.writes).contains("your files, your say"));

        let many: Vec<String> = (0..40)
            .map(|i| {
                format!("{{\"name\": \"read_file\", \"arguments\": {{\"path\": \"{i}.md\"}}}}")
            })
            .collect();
        let text = format!("<tools>\n{}\n</tools>", many.join("\n"));
        let TextCallDecision::Calls {
            response, refused, ..
        } = screen(reply(&text), &reg, 1, "read them")
        else {
            panic!("not screened as calls");
        };
        assert_eq!(response.tool_calls.len(), MAX_CALLS_PER_REPLY);
        assert_eq!(refused.over_limit, Some(40));
        assert!(over_limit_note(40).contains("other 24 were not run"));
    }

    #[test]
    fn a_text_reply_runs_its_first_step_and_leaves_the_rest_for_later() {
        let reg = default_registry();
        let call = |name: &str, args: &str| {
            format!("```json\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n```")
        };
        // The tools of the default registry stand in for the measured
        // reply: a ranked read, a guessed follow-up, a read repeated.
        let ranked = call("list_dir", r#"{"path": "."}"#);
        let guessed = call("read_file", r#"{"path": "MSFT.csv"}"#);
        let read = call("read_file", r#"{"path": "AAPL.csv"}"#);
        let text = format!("{ranked}\n\n{guessed}\n\n{read}\n\n{read}\n\n{read}");
        let TextCallDecision::Calls {
            response, refused, ..
        } = screen(reply(&text), &reg, 1, "most volatile, then backtest it")
        else {
            panic!("not screened as calls");
        };
        let ran: Vec<&str> = response.tool_calls.iter().map(|c| c.name()).collect();
        assert_eq!(ran, ["list_dir"]);
        assert_eq!(refused.step.as_deref(), Some("list_dir"));
        assert_eq!(
            refused.deferred,
            ["read_file", "read_file", "read_file", "read_file"]
        );
        let note = deferred_note("list_dir", &refused.deferred);
        assert!(
            note.contains("then call `read_file` with what it says"),
            "{note}"
        );

        // One tool side by side runs together, each distinct call once.
        let a = call("read_file", r#"{"path": "a.md"}"#);
        let b = call("read_file", r#"{"path": "b.md"}"#);
        let text = format!("{a}\n\n{b}\n\n{a}");
        let TextCallDecision::Calls {
            response, refused, ..
        } = screen(reply(&text), &reg, 2, "read a and b")
        else {
            panic!("not screened as calls");
        };
        let paths: Vec<&str> = response
            .tool_calls
            .iter()
            .map(|c| c.function.arguments.as_str())
            .collect();
        assert_eq!(paths, [r#"{"path":"a.md"}"#, r#"{"path":"b.md"}"#]);
        assert!(refused.deferred.is_empty());
    }

    #[test]
    fn plain_answers_and_native_calls_pass() {
        let reg = default_registry();
        assert!(matches!(
            screen(reply("RSI was 41."), &reg, 1, "rsi"),
            TextCallDecision::NotACall(_)
        ));
        let native = Response {
            content: "```json\n{\"name\": \"read_file\", \"arguments\": {}}\n```".into(),
            tool_calls: vec![ToolCall::new("c", "list_dir", "{}")],
            ..Response::default()
        };
        assert!(matches!(
            screen(native, &reg, 1, "list"),
            TextCallDecision::NotACall(_)
        ));
    }
}
