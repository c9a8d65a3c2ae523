//! Tool calls written as text (docs §2.11.1). Small local models behind an
//! OpenAI-compatible server often write a correct call into the reply's text
//! instead of the tool-call channel. This module finds such calls; the loop
//! decides whether they name tools that were offered.
//!
//! Forms read, in this order:
//! - `<tool_call>{…}</tool_call>` (Hermes / Qwen templates; the closing tag
//!   may be missing at the end of the reply);
//! - `<tools>` followed by one JSON call per line;
//! - fenced blocks (```` ```json ````, ```` ```tool_call ````, or no tag);
//! - a reply that opens with a tag named after the tool, its arguments
//!   after it (`<backtest> {…}`, `<function=backtest>{…}</function>`);
//! - a reply that is nothing but JSON.
//!
//! A call is a JSON object with `name` (or `function`, a name or an object
//! holding `name` and `arguments`) and `arguments` (or `parameters`, an
//! object or a JSON string); `{"tool_calls": […]}` and arrays hold several.
//! JSON is read leniently: doubled braces (`{{…}}`), Python literals
//! (`True`, `False`, `None`), single-quoted strings and trailing commas are
//! repaired before parsing.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

/// Which form the first call found was written in (the trace names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextCallForm {
    ToolCallTag,
    ToolsLines,
    FencedJson,
    /// `<name> {arguments}`: the tag names the tool.
    NamedTag,
    BareJson,
}

impl TextCallForm {
    pub fn as_str(self) -> &'static str {
        match self {
            TextCallForm::ToolCallTag => "tool_call_tag",
            TextCallForm::ToolsLines => "tools_lines",
            TextCallForm::FencedJson => "fenced_json",
            TextCallForm::NamedTag => "named_tag",
            TextCallForm::BareJson => "bare_json",
        }
    }
}

/// One call as the text wrote it.
#[derive(Clone, Debug, PartialEq)]
pub struct TextCall {
    pub name: String,
    /// Always an object (`{}` when the text gave none).
    pub arguments: Value,
}

/// The calls a reply's text holds, and the text around them.
#[derive(Clone, Debug, PartialEq)]
pub struct TextCalls {
    pub calls: Vec<TextCall>,
    pub form: TextCallForm,
    /// The reply without the blocks that held calls, trimmed.
    pub rest: String,
    /// The literal JSON repairs applied (`doubled_braces`, `python_literals`, …).
    pub repairs: Vec<&'static str>,
    /// Where the prose of `rest` sat: before the first block, between
    /// blocks, after the last one (each trimmed). Whether the reply *is* the
    /// call or shows one inside an explanation is read from these.
    pub lead: String,
    pub between: String,
    pub after: String,
}

/// Longest lead-in a reply that is a call may have (docs §2.11.1).
pub const LEAD_IN_MAX_CHARS: usize = 160;

/// Words of a lead-in that introduce an example rather than a call.
const EXAMPLE_WORDS: [&str; 7] = [
    "example",
    "for instance",
    "e.g.",
    "look like",
    "looks like",
    "would look",
    "sample",
];

/// Why calls found in a reply's text are an example shown inside an
/// explanation, not calls (docs §2.11.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotTheCall {
    /// Text after the last call block.
    ProseAfter,
    /// Text between call blocks.
    ProseBetween,
    /// A lead-in of more than one line or [`LEAD_IN_MAX_CHARS`].
    LongLeadIn,
    /// A lead-in that says "for example", "looks like", …
    ExampleLeadIn,
    /// The user's latest message asked for an example, or not to run.
    UserAskedForExample,
}

impl NotTheCall {
    pub fn as_str(self) -> &'static str {
        match self {
            NotTheCall::ProseAfter => "prose_after_the_call",
            NotTheCall::ProseBetween => "prose_between_calls",
            NotTheCall::LongLeadIn => "long_lead_in",
            NotTheCall::ExampleLeadIn => "example_lead_in",
            NotTheCall::UserAskedForExample => "user_asked_for_example",
        }
    }
}

impl TextCalls {
    /// `None` when the reply *is* its calls: at most a short lead-in (one
    /// line, at most [`LEAD_IN_MAX_CHARS`], no example words), nothing but
    /// whitespace between and after the blocks. Otherwise why it is not.
    pub fn not_the_call(&self) -> Option<NotTheCall> {
        if !self.after.is_empty() {
            return Some(NotTheCall::ProseAfter);
        }
        if !self.between.is_empty() {
            return Some(NotTheCall::ProseBetween);
        }
        if self.lead.contains('\n') || self.lead.chars().count() > LEAD_IN_MAX_CHARS {
            return Some(NotTheCall::LongLeadIn);
        }
        let lead = self.lead.to_lowercase();
        if EXAMPLE_WORDS.iter().any(|w| lead.contains(w)) {
            return Some(NotTheCall::ExampleLeadIn);
        }
        None
    }
}

/// Phrases of a user message that ask not to run anything.
const DO_NOT_RUN: [&str; 21] = [
    "don't run",
    "do not run",
    "dont run",
    "don't save",
    "do not save",
    "dont save",
    "don't execute",
    "do not execute",
    "don't call",
    "do not call",
    "don't actually",
    "do not actually",
    "without running",
    "without calling",
    "without saving",
    "without executing",
    "not to run",
    "not to call",
    "not to save",
    "not to execute",
    "no need to run",
];

/// Phrases asking what a call looks like.
const LOOKS_LIKE: [&str; 3] = ["look like", "looks like", "would look"];
/// Words that make "looks like" about a call.
const CALL_WORDS: [&str; 4] = ["call", "json", "syntax", "invocation"];
/// Phrases asking for an example of a call.
const EXAMPLE_OF_A_CALL: [&str; 12] = [
    "example call",
    "example tool call",
    "example json",
    "example of a call",
    "example of the call",
    "example of calling",
    "example of a tool call",
    "example of how to call",
    "call example",
    "json example",
    "sample call",
    "sample json",
];

/// Whether a user message asks for an example of a call, or not to run
/// anything (docs §2.11.1): a do-not-run phrase ("don't save anything",
/// "without running"), "looks like" with "call", "JSON" or "syntax" ("show
/// me what a remember call looks like"), or an example of a call ("example
/// call", "sample JSON", …). "Show me an example backtest" is a request,
/// not this.
pub fn asks_for_example(message: &str) -> bool {
    let m = message
        .to_lowercase()
        .replace(['\u{2019}', '\u{2018}'], "'");
    let has = |phrases: &[&str]| phrases.iter().any(|p| m.contains(p));
    has(&DO_NOT_RUN) || (has(&LOOKS_LIKE) && has(&CALL_WORDS)) || has(&EXAMPLE_OF_A_CALL)
}

static TOOL_CALL_TAG: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)<tool_call>\s*(.*?)\s*(?:</tool_call>|\z)").ok());
static TOOLS_TAG: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)<tools>\s*(.*?)\s*(?:</tools>|\z)").ok());
/// A reply opening with `<name>` or `<function=name>`, JSON after it.
static NAMED_TAG: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?s)\A\s*<(?:function=)?([A-Za-z_][A-Za-z0-9_.\-]*)>\s*(\{.*)").ok()
});
static FENCE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)```[ \t]*([A-Za-z_]*)[ \t]*\n?(.*?)(?:```|\z)").ok());

/// The calls in `text`, or `None` when it holds none (a JSON block that is
/// data rather than a call stays text).
pub fn parse(text: &str) -> Option<TextCalls> {
    let forms: [(&LazyLock<Option<Regex>>, TextCallForm); 3] = [
        (&TOOL_CALL_TAG, TextCallForm::ToolCallTag),
        (&TOOLS_TAG, TextCallForm::ToolsLines),
        (&FENCE, TextCallForm::FencedJson),
    ];
    for (re, form) in forms {
        let Some(re) = re.as_ref() else { continue };
        let body_group = if form == TextCallForm::FencedJson {
            2
        } else {
            1
        };
        let mut calls = Vec::new();
        let mut repairs = Vec::new();
        let mut rest = String::new();
        let (mut lead, mut between) = (None, String::new());
        let mut last = 0;
        for caps in re.captures_iter(text) {
            let (Some(whole), Some(body)) = (caps.get(0), caps.get(body_group)) else {
                continue;
            };
            let found = calls_in(body.as_str(), &mut repairs);
            if found.is_empty() {
                continue;
            }
            calls.extend(found);
            let gap = &text[last..whole.start()];
            rest.push_str(gap);
            match lead {
                None => lead = Some(gap.trim().to_string()),
                Some(_) => between.push_str(gap),
            }
            last = whole.end();
        }
        if !calls.is_empty() {
            rest.push_str(&text[last..]);
            return Some(TextCalls {
                calls,
                form,
                rest: rest.trim().to_string(),
                repairs,
                lead: lead.unwrap_or_default(),
                between: between.trim().to_string(),
                after: text[last..].trim().to_string(),
            });
        }
    }
    if let Some(found) = named_tag(text) {
        return Some(found);
    }
    let trimmed = text.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut repairs = Vec::new();
        let calls = calls_in(trimmed, &mut repairs);
        if !calls.is_empty() {
            return Some(TextCalls {
                calls,
                form: TextCallForm::BareJson,
                rest: String::new(),
                repairs,
                lead: String::new(),
                between: String::new(),
                after: String::new(),
            });
        }
    }
    None
}

/// `<backtest> {"symbols": ["IBM"], …}` (the 1.5B model wrote this once
/// the schemas were lean): the tag is the tool, the JSON its arguments, or
/// a whole call. The closing tag is optional; text after it is the rest.
fn named_tag(text: &str) -> Option<TextCalls> {
    let caps = NAMED_TAG.as_ref()?.captures(text)?;
    let (name, body) = (caps.get(1)?.as_str(), caps.get(2)?.as_str());
    if ["tool_call", "tools", "function"].contains(&name) {
        return None;
    }
    let mut repairs = Vec::new();
    let (value, used) = match first_value(body) {
        Some(v) => v,
        None => {
            let (fixed, applied) = repair(body);
            let (v, _) = first_value(&fixed)?;
            repairs = applied;
            // The repaired text has other offsets: nothing after it is kept.
            (v, body.len())
        }
    };
    let mut calls = calls_of(&value);
    if calls.is_empty() {
        let Value::Object(args) = value else {
            return None;
        };
        calls.push(TextCall {
            name: name.to_string(),
            arguments: Value::Object(args),
        });
    }
    let after = body[used..].trim_start();
    let after = after
        .strip_prefix(&format!("</{name}>"))
        .or_else(|| after.strip_prefix("</function>"))
        .unwrap_or(after);
    Some(TextCalls {
        calls,
        form: TextCallForm::NamedTag,
        rest: after.trim().to_string(),
        repairs,
        lead: String::new(),
        between: String::new(),
        after: after.trim().to_string(),
    })
}

/// The first JSON value of `text` and the bytes it took.
fn first_value(text: &str) -> Option<(Value, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let v = values.next()?.ok()?;
    Some((v, values.byte_offset()))
}

/// Whether text that starts like this could still turn out to be a call
/// (the assembler holds such text back from the live stream).
pub fn may_open_call(text: &str) -> Option<bool> {
    const OPENERS: [&str; 4] = ["```", "<tool_call>", "<tools>", "{"];
    let t = text.trim_start();
    if t.is_empty() {
        return None;
    }
    if OPENERS.iter().any(|o| t.starts_with(o)) {
        return Some(true);
    }
    if OPENERS.iter().any(|o| o.starts_with(t)) {
        return None;
    }
    named_tag_opens(t)
}

/// `<name>` then `{`: a call in the named-tag form; `<name` or `<name>`
/// alone is undecided; anything else is text.
fn named_tag_opens(t: &str) -> Option<bool> {
    let Some(rest) = t.strip_prefix('<') else {
        return Some(false);
    };
    let rest = rest.strip_prefix("function=").unwrap_or(rest);
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        .unwrap_or(rest.len());
    let after = &rest[name_len..];
    if after.is_empty() {
        // `<`, `<backt`, `<function=`: the tag is not closed yet.
        return None;
    }
    let Some(after) = after.strip_prefix('>') else {
        return Some(false);
    };
    if name_len == 0 {
        return Some(false);
    }
    match after.trim_start().chars().next() {
        None => None,
        Some('{') => Some(true),
        Some(_) => Some(false),
    }
}

/// Every call in one block's body: a JSON value, or JSON values one after
/// another (JSON lines).
fn calls_in(body: &str, repairs: &mut Vec<&'static str>) -> Vec<TextCall> {
    let body = body.trim();
    if !(body.starts_with('{') || body.starts_with('[')) {
        return Vec::new();
    }
    let mut values = json_values(body);
    if values.is_empty() {
        let (fixed, applied) = repair(body);
        values = json_values(&fixed);
        if !values.is_empty() {
            for a in applied {
                if !repairs.contains(&a) {
                    repairs.push(a);
                }
            }
        }
    }
    values.iter().flat_map(calls_of).collect()
}

/// A JSON Schema of an object's parameters, not arguments for them.
fn is_json_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("object")
        && v.get("properties").is_some_and(Value::is_object)
}

/// JSON values one after another, as many as parse from the start.
fn json_values(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .collect()
}

/// The calls one JSON value holds.
fn calls_of(v: &Value) -> Vec<TextCall> {
    match v {
        Value::Array(items) => items.iter().flat_map(calls_of).collect(),
        Value::Object(o) => {
            if let Some(inner) = o.get("tool_calls") {
                return calls_of(inner);
            }
            call_of(o).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

fn call_of(o: &Map<String, Value>) -> Option<TextCall> {
    let function = o.get("function");
    let (name, args) = match function {
        Some(Value::Object(f)) => (
            f.get("name").and_then(Value::as_str),
            f.get("arguments").or_else(|| f.get("parameters")),
        ),
        Some(Value::String(f)) => (Some(f.as_str()), None),
        _ => (None, None),
    };
    let name = name
        .or_else(|| {
            ["name", "tool", "tool_name"]
                .iter()
                .find_map(|k| o.get(*k)?.as_str())
        })?
        .trim();
    let name = name.strip_prefix("functions.").unwrap_or(name);
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let args = args.or_else(|| {
        ["arguments", "parameters", "args", "input"]
            .iter()
            .find_map(|k| o.get(*k))
    });
    // A tool's schema echoed from the prompt (`{"type": "function",
    // "function": {"name": …, "parameters": {"type": "object",
    // "properties": …}}}`) names a tool but calls nothing: measured, the
    // 1.5B model wrote the prompt's `<tools>` block back before its call.
    if args.is_some_and(is_json_schema) {
        return None;
    }
    let arguments = match args {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(a)) => Value::Object(a.clone()),
        Some(Value::String(s)) => match json_values(s.trim()).into_iter().next() {
            Some(v @ Value::Object(_)) => v,
            _ => match json_values(&repair(s.trim()).0).into_iter().next() {
                Some(v @ Value::Object(_)) => v,
                _ => return None,
            },
        },
        Some(_) => return None,
    };
    // A JSON object with a name but no arguments key at all is more likely
    // data than a call (`{"name": "Apple"}`), unless `function` said so.
    if args.is_none() && function.is_none() {
        return None;
    }
    Some(TextCall {
        name: name.to_string(),
        arguments,
    })
}

/// Lenient JSON: single-quoted strings become double-quoted, Python's
/// `True`/`False`/`None` become JSON literals, trailing commas go, and a
/// text that opens with `{{` has its doubled braces halved. Returns the
/// text and the repairs it needed.
pub fn repair(text: &str) -> (String, Vec<&'static str>) {
    let mut applied = Vec::new();
    let doubled = text.trim_start().starts_with("{{");
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => {
                let (s, next) = read_string(&chars, i);
                if c == '\'' {
                    note(&mut applied, "single_quotes");
                }
                out.push_str(&s);
                i = next;
                continue;
            }
            '{' | '}' if doubled && chars.get(i + 1) == Some(&c) => {
                note(&mut applied, "doubled_braces");
                out.push(c);
                i += 2;
                continue;
            }
            ',' => {
                let next = chars[i + 1..].iter().find(|ch| !ch.is_whitespace());
                if matches!(next, Some('}' | ']')) {
                    note(&mut applied, "trailing_comma");
                    i += 1;
                    continue;
                }
            }
            c if c.is_ascii_alphabetic() => {
                let end = (i..chars.len())
                    .find(|&k| !chars[k].is_ascii_alphanumeric() && chars[k] != '_')
                    .unwrap_or(chars.len());
                let word: String = chars[i..end].iter().collect();
                let replaced = match word.as_str() {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    w => {
                        out.push_str(w);
                        i = end;
                        continue;
                    }
                };
                note(&mut applied, "python_literals");
                out.push_str(replaced);
                i = end;
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    (out, applied)
}

fn note(applied: &mut Vec<&'static str>, what: &'static str) {
    if !applied.contains(&what) {
        applied.push(what);
    }
}

/// The string literal starting at `start` (quote `"` or `'`) as a JSON
/// string, and the index after it. An unterminated string runs to the end.
fn read_string(chars: &[char], start: usize) -> (String, usize) {
    let quote = chars[start];
    let mut out = String::from('"');
    let mut i = start + 1;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let next = chars[i + 1];
            // `\'` needs no escape inside a JSON string.
            if next == '\'' {
                out.push('\'');
            } else {
                out.push(c);
                out.push(next);
            }
            i += 2;
            continue;
        }
        if c == quote {
            out.push('"');
            return (out, i + 1);
        }
        if c == '"' {
            out.push_str("\\\"");
        } else {
            out.push(c);
        }
        i += 1;
    }
    out.push('"');
    (out, i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> (TextCall, TextCallForm) {
        let t = parse(text).unwrap_or_else(|| panic!("no call in {text:?}"));
        assert_eq!(t.calls.len(), 1, "{text}");
        (t.calls[0].clone(), t.form)
    }

    #[test]
    fn fenced_json_with_name_and_arguments() {
        let (c, form) = one(
            "```json\n{\"name\": \"technical_indicator\", \"arguments\": {\"symbol\": \"AAPL\", \"indicator\": \"rsi\"}}\n```",
        );
        assert_eq!(form, TextCallForm::FencedJson);
        assert_eq!(c.name, "technical_indicator");
        assert_eq!(c.arguments, json!({"symbol": "AAPL", "indicator": "rsi"}));
    }

    #[test]
    fn function_and_parameters_spellings() {
        let (c, _) =
            one("```\n{\"function\": \"backtest\", \"parameters\": {\"symbols\": [\"IBM\"]}}\n```");
        assert_eq!(c.name, "backtest");
        assert_eq!(c.arguments, json!({"symbols": ["IBM"]}));
        let (c, _) = one(
            "{\"type\": \"function\", \"function\": {\"name\": \"functions.get_market_data\", \"arguments\": \"{\\\"symbol\\\": \\\"MSFT\\\"}\"}}",
        );
        assert_eq!(c.name, "get_market_data");
        assert_eq!(c.arguments, json!({"symbol": "MSFT"}));
    }

    #[test]
    fn tool_call_tags_and_tools_lines() {
        let (c, form) = one(
            "<tool_call>\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"IBM\"}}\n</tool_call>",
        );
        assert_eq!(
            (c.name.as_str(), form),
            ("get_market_data", TextCallForm::ToolCallTag)
        );
        let t = parse(
            "<tools>\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"AAPL\"}}\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"MSFT\"}}\n</tools>",
        )
        .unwrap();
        assert_eq!(t.form, TextCallForm::ToolsLines);
        assert_eq!(t.calls.len(), 2);
        assert_eq!(t.calls[1].arguments["symbol"], "MSFT");
    }

    #[test]
    fn an_echoed_tool_schema_is_no_call_and_the_call_after_it_is_found() {
        let schema = "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"technical_indicator\", \"description\": \"A ticker's rsi\", \"parameters\": {\"type\": \"object\", \"properties\": {\"symbol\": {\"type\": \"string\"}}, \"required\": [\"indicator\"]}}}\n</tools>";
        assert_eq!(parse(schema), None);
        let text = format!(
            "{schema}\n\n```json\n{{\"name\": \"technical_indicator\", \"arguments\": {{\"symbol\": \"MSFT\", \"indicator\": \"volatility\"}}}}\n```"
        );
        let t = parse(&text).unwrap();
        assert_eq!(t.form, TextCallForm::FencedJson);
        assert_eq!(t.calls.len(), 1);
        assert_eq!(t.calls[0].arguments["symbol"], "MSFT");
        // Arguments that merely hold a `type` are still arguments.
        let (c, _) = one(
            "{\"name\": \"option_price\", \"arguments\": {\"type\": \"object\", \"spot\": 100}}",
        );
        assert_eq!(c.arguments["spot"], 100);
    }

    #[test]
    fn doubled_braces_and_python_literals_are_repaired() {
        let t = parse(
            "{{\"name\": \"technical_indicator\", \"arguments\": {{\"symbol\": \"AAPL\", \"indicator\": \"rsi\", \"source\": None, \"adjusted\": False}}}}",
        )
        .unwrap();
        assert_eq!(t.form, TextCallForm::BareJson);
        assert_eq!(
            t.calls[0].arguments,
            json!({"symbol": "AAPL", "indicator": "rsi", "source": null, "adjusted": false})
        );
        assert!(t.repairs.contains(&"doubled_braces"), "{:?}", t.repairs);
        assert!(t.repairs.contains(&"python_literals"), "{:?}", t.repairs);
        let (c, _) = one(
            "```python\n{'name': 'get_market_data', 'arguments': {'symbol': 'IBM', 'note': \"it's\", 'all': True,},}\n```",
        );
        assert_eq!(
            c.arguments,
            json!({"symbol": "IBM", "note": "it's", "all": true})
        );
    }

    #[test]
    fn prose_around_a_call_is_kept_as_rest() {
        let t = parse("Let me fetch it.\n```json\n{\"name\": \"x\", \"arguments\": {}}\n```\nThen I will answer.").unwrap();
        assert_eq!(t.rest, "Let me fetch it.\n\nThen I will answer.");
    }

    #[test]
    fn data_and_prose_are_not_calls() {
        assert!(parse("The RSI was 41.2 on 2008-01-25.").is_none());
        assert!(parse("```json\n{\"symbol\": \"AAPL\", \"close\": 12.5}\n```").is_none());
        assert!(parse("```json\n{\"name\": \"Apple Inc.\"}\n```").is_none());
        assert!(parse("{\"status\": \"error\", \"error\": \"no data\"}").is_none());
        assert!(parse("```python\nprint(1)\n```").is_none());
    }

    #[test]
    fn unterminated_blocks_still_count() {
        let (c, _) = one(
            "<tool_call>\n{\"name\": \"get_market_data\", \"arguments\": {\"symbol\": \"IBM\"}}",
        );
        assert_eq!(c.name, "get_market_data");
        let (c, _) = one("```json\n{\"name\": \"backtest\", \"arguments\": {}}");
        assert_eq!(c.name, "backtest");
    }

    #[test]
    fn openers_decide_the_hold_back() {
        assert_eq!(may_open_call("  "), None);
        assert_eq!(may_open_call("``"), None);
        assert_eq!(may_open_call("<tool"), None);
        assert_eq!(may_open_call("```json"), Some(true));
        assert_eq!(may_open_call("{\"name\""), Some(true));
        assert_eq!(may_open_call("The answer"), Some(false));
        assert_eq!(may_open_call("<b>bold"), Some(false));
        assert_eq!(may_open_call("<backtest>"), None);
        assert_eq!(may_open_call("<backtest> {\"sym"), Some(true));
        assert_eq!(may_open_call("<function=backtest>{"), Some(true));
        assert_eq!(may_open_call("< b"), Some(false));
        assert_eq!(may_open_call("<3 is a heart"), Some(false));
    }

    #[test]
    fn a_tag_named_after_the_tool_holds_its_arguments() {
        let t = parse("<backtest> {\"strategy\": \"sma_crossover\", \"params\": {\"fast\": 10, \"slow\": 30}, \"symbols\": [\"IBM\"], \"validation\": {\"monte_carlo\": true}}").unwrap();
        assert_eq!(t.form, TextCallForm::NamedTag);
        assert_eq!(t.calls.len(), 1);
        assert_eq!(t.calls[0].name, "backtest");
        assert_eq!(t.calls[0].arguments["symbols"], json!(["IBM"]));
        assert_eq!(t.rest, "");
        let t =
            parse("<function=get_market_data>{\"symbol\": \"AAPL\"}</function>\nThen I answer.")
                .unwrap();
        assert_eq!(t.calls[0].name, "get_market_data");
        assert_eq!(t.calls[0].arguments, json!({"symbol": "AAPL"}));
        assert_eq!(t.rest, "Then I answer.");
        let t = parse("<get_market_data>\n{'symbol': 'IBM', 'adjusted': True}\n</get_market_data>")
            .unwrap();
        assert_eq!(
            t.calls[0].arguments,
            json!({"symbol": "IBM", "adjusted": true})
        );
        assert!(t.repairs.contains(&"python_literals"), "{:?}", t.repairs);
        // A whole call inside a tag is that call.
        let (c, _) =
            one("<call>{\"name\": \"backtest\", \"arguments\": {\"symbols\": [\"IBM\"]}}</call>");
        assert_eq!(c.name, "backtest");
        // Text that merely starts with markup is not a call.
        assert!(parse("<b>Note</b> {not json}").is_none());
        assert!(parse("The tag <backtest> {\"x\": 1} is mid-text").is_none());
    }

    /// The rule of §2.11.1: a reply is its calls with at most a short
    /// one-line lead-in and nothing after; otherwise it shows an example.
    #[test]
    fn a_reply_is_its_calls_only_with_a_short_lead_in_and_nothing_after() {
        let block = "```json\n{\"name\": \"x\", \"arguments\": {}}\n```";
        let verdict = |text: &str| parse(text).and_then(|t| t.not_the_call());
        assert_eq!(verdict(block), None);
        assert_eq!(
            verdict(&format!("Let me fetch the data:\n\n{block}\n  ")),
            None
        );
        assert_eq!(verdict(&format!("{block}\n{block}")), None);
        assert_eq!(
            verdict(&format!("{block}\nThen I will answer.")),
            Some(NotTheCall::ProseAfter)
        );
        assert_eq!(
            verdict(&format!("{block}\nand then\n{block}")),
            Some(NotTheCall::ProseBetween)
        );
        assert_eq!(
            verdict(&format!("A call has a name.\nIt has arguments:\n{block}")),
            Some(NotTheCall::LongLeadIn)
        );
        let long = "word ".repeat(LEAD_IN_MAX_CHARS / 5 + 1);
        assert_eq!(
            verdict(&format!("{long}\n{block}")),
            Some(NotTheCall::LongLeadIn)
        );
        assert_eq!(
            verdict(&format!("Here is what one looks like:\n{block}")),
            Some(NotTheCall::ExampleLeadIn)
        );
        assert_eq!(
            verdict(&format!("For example:\n{block}")),
            Some(NotTheCall::ExampleLeadIn)
        );
        // The forms small models write stay calls.
        assert_eq!(
            verdict("<tool_call>\n{\"name\": \"x\", \"arguments\": {}}\n</tool_call>"),
            None
        );
        assert_eq!(verdict("<backtest> {\"symbols\": [\"IBM\"]}"), None);
        assert_eq!(verdict("{\"name\": \"x\", \"arguments\": {}}"), None);
        assert_eq!(
            verdict("<function=x>{\"a\": 1}</function>\nThen I answer."),
            Some(NotTheCall::ProseAfter)
        );
    }

    #[test]
    fn a_user_asking_for_an_example_is_told_apart_from_a_request() {
        for asks in [
            "Show me what a remember call looks like, don't save anything",
            "what would the JSON look like?",
            "Give me an example call for backtest",
            "Write the sample JSON for get_market_data",
            "Just show the call, do not run it",
            "Draft it without running anything",
            "Don\u{2019}t save that",
        ] {
            assert!(asks_for_example(asks), "{asks}");
        }
        for request in [
            "Backtest an SMA crossover on AAPL",
            "Show me an example backtest of momentum on SPY",
            "Price a call option on AAPL",
            "Remember to use commission_rate 0.5",
            "What does the data say?",
        ] {
            assert!(!asks_for_example(request), "{request}");
        }
    }

    #[test]
    fn regexes_compile() {
        assert!(
            TOOL_CALL_TAG.is_some()
                && TOOLS_TAG.is_some()
                && FENCE.is_some()
                && NAMED_TAG.is_some()
        );
    }
}
